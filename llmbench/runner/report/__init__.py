"""Presentation: console tables, PNG plots, the HTML report."""
