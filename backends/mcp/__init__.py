"""The MCP client: ``--mcp`` specs and ``[mcp.NAME]`` servers started, timed and called as one tool host."""
