"""Radium: run the heavy part of unmodified containerised ML applications on pooled remote GPUs."""

__version__ = "0.1.0"
