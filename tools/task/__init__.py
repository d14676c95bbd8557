"""AMID."""
