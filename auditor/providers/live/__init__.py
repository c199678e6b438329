"""providers/live"""
