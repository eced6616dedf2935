"""Reporters: each turns a sorted sequence of diagnostics into one output format."""

FORMATS = ("text", "json", "sarif", "github", "junit")
