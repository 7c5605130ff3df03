"""Pure rules that a benchmark's generator and its scorer both apply, each in a module named for the rule.

This is the lowest layer both may import (dataset_builder -> metrics), so a scorer reads a rule here and never
imports a generator module (tests/test_layering.py). Nothing here builds data or scores a run: only the shared
definition (a table, a tokenisation, an event rule).
"""
