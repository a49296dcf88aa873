"""The LLM proxy: an OpenAI-compatible endpoint per rollout attempt that records every call as spans on Kafka."""
