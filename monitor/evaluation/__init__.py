"""Pure evaluation over fleet state and the layout: figures, rollups, money, verdicts.

Nothing in this package does I/O, reads a clock, or imports Textual: every function takes
`now` and plain data, so it is unit-testable with plain numbers.
"""
