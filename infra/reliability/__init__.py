"""Exactly-once iterations: step journal, fault injection, recovery."""
