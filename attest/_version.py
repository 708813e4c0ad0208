"""The tool's version, recorded in every certificate and evidence file."""

__version__ = "0.1.0"
