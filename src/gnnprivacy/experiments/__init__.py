"""Typed run configuration, the method registry and the runner that every entry point uses."""
