"""jinja2 templates of the audit report."""
