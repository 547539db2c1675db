"""Reusable test support: real local servers and stand-ins that tests drive end to end."""
