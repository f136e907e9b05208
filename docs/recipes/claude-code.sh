# Claude Code through ctxc (`ctxc serve` on its default port 8080): the conversation is stored
# in the session my-project and compiled for a 200,000-token window before each request.
# ctxc passes the key on to Anthropic and never stores it.
export ANTHROPIC_BASE_URL=http://127.0.0.1:8080/anthropic
export ANTHROPIC_API_KEY="$YOUR_ANTHROPIC_API_KEY"
export ANTHROPIC_CUSTOM_HEADERS='X-Ctxc-Session: my-project
X-Ctxc-Context-Window: 200000'
claude -p "List the files here and say what each one is for"
