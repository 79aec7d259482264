"""Routing: where each message a broker handles goes next (router.py)."""
