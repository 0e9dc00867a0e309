"""Myriad: plan, provision, bring up and validate GPU training clusters from one spec."""

import logging

__version__ = "0.1.0"
# The version of every JSON document a command prints; raised when a field changes meaning
# or goes away (adding one does not).
JSON_FORMAT = 1

logging.getLogger(__name__).addHandler(logging.NullHandler())
