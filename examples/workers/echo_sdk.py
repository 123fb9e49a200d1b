#!/usr/bin/env python3
"""Echoes each request back. Needs `pip install ./sdk/python`; see docs/PROTOCOL.md."""
from kennel_worker import serve

serve(lambda request: request)
