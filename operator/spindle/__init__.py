"""Spindle: evolve Spark SQL pipelines without re-ingesting history."""

__version__ = "0.1.0"
