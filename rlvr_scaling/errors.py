"""Errors the user should see as a one-line message rather than a traceback."""


class ConfigError(ValueError):
    """A configuration value breaks a rule. The message names the dotted key and the rule."""
