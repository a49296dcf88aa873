"""Runners: processes that take tasks from the experiment's task topic and run the agent on them."""
