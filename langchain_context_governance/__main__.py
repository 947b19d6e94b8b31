"""`python -m langchain_context_governance`: the same program as `context-governance`."""

from langchain_context_governance.cli import main

if __name__ == "__main__":
    main()
