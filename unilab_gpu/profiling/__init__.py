"""Timing and benchmark helpers."""
