"""Myriad: plan, provision, bring up and validate GPU training clusters from one spec."""

import logging

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())
