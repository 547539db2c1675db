"""The pure domain: no I/O, no subprocess, no network, no clock reads (time is passed in)."""
