"""The built-in ``offline`` model, pure: ``rules`` says which history lines are kept and as what,
``engine`` answers dream-memory's own prompts with them (the ChatModel port)."""
