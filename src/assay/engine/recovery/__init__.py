"""Closing what a run left open when its host died or it was stopped: its usage, its refunds."""
