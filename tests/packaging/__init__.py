"""A non-editable install of the package works on its own."""
