"""providers/billing"""
