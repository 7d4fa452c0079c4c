## The client core and the local provider's library modules.
