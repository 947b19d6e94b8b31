"""Pure decisions over a history: what governance says at a cut, and in which role."""
