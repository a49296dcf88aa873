"""Deployment artifacts derived from the code: Kubernetes resources rendered from the topic layout."""
