"""Callbacks that attach gpuscope to training frameworks. Import the one you use:
``gpuscope.integrations.lightning`` or ``gpuscope.integrations.huggingface``."""
