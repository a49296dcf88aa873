"""Commands: validate, decide against the view, emit events. Pure apart from the clock and random ids."""
