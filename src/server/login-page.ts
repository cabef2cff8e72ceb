/** The page a browser sees at /login: how to get a login link, and why the last one did not work. */
export function loginPage(problem: string | null): string {
  const note = problem ? `<p class="error">${problem}</p>` : "";
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>DuckLM — log in</title>
  <link rel="icon" href="/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="/style.css">
</head>
<body class="login-page">
  <main class="login">
    <h1><img src="/favicon.svg" alt="" width="28" height="28"> DuckLM</h1>
    ${note}
    <p>To use the chat in this browser, open the login link DuckLM prints in the terminal where it runs.</p>
    <p>For a new link, run <code>ducklm login</code> on this machine. A link works once, for 15 minutes.</p>
  </main>
</body>
</html>
`;
}
