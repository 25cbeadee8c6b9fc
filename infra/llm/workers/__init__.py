"""The trainer ranks and the actor/reference Ray workers shared by the LLM kinds."""
