"""AMID server: processes and infrastructure."""

__version__ = "0.1.0"
