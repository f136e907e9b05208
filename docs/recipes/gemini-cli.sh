# Gemini CLI through ctxc (`ctxc serve` on its default port 8080): the conversation is stored
# in the session my-project and compiled for a 200,000-token window before each request.
# ctxc passes the key on to Google and never stores it.
export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080/gemini
export GEMINI_API_KEY="$YOUR_GEMINI_API_KEY"
export GEMINI_CLI_CUSTOM_HEADERS='X-Ctxc-Session: my-project, X-Ctxc-Context-Window: 200000'
# With a base URL of its own, Gemini CLI needs the API key chosen as its sign-in (what its
# first start asks); headless, it cannot ask. Once, unless your settings say it already.
# (--skip-trust: the folder is trusted for this run, as headless runs require.)
if [ ! -f ~/.gemini/settings.json ]; then
  mkdir -p ~/.gemini
  echo '{"security": {"auth": {"selectedType": "gemini-api-key"}}}' > ~/.gemini/settings.json
fi
gemini -p "List the files here and say what each one is for" --skip-trust
