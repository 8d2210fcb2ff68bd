// How a page gets the token it calls the API with (docs/DESIGN.md section 12): a token pasted into
// the form (the local runner prints one), or the deployment's Cognito hosted UI when config.json
// names it. The organiser's page keeps it for the tab (sessionStorage); the door's for the device
// (localStorage), so the scanner reopens signed in without the network. Tokens go to the API
// only, in the Authorization header, never into a URL or a log.

export function session(storage, page) {
  const key = `ticket-grab.${page}.token`;
  // Back from the hosted UI: the ID token arrives in the fragment; keep it, then clear it away.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get('id_token')) {
    storage.setItem(key, fragment.get('id_token'));
    for (const name of ['id_token', 'access_token', 'token_type', 'expires_in', 'state']) fragment.delete(name);
    const rest = fragment.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
  }
  return {
    token: () => storage.getItem(key),
    set: (token) => storage.setItem(key, token.trim()),
    forget: () => storage.removeItem(key),
    /** The token's claims (read, not verified: the API verifies), or null. */
    claims() {
      const token = storage.getItem(key);
      try {
        const body = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
        return JSON.parse(atob(body));
      } catch {
        return null;
      }
    },
    api(path, init = {}) {
      const headers = new Headers(init.headers || {});
      headers.set('authorization', `Bearer ${storage.getItem(key)}`);
      return fetch(path, { ...init, headers, cache: 'no-store' });
    },
    /** The hosted UI's sign-in address, when this deployment has one. */
    async hostedUi() {
      try {
        const config = await (await fetch('config.json', { cache: 'no-store' })).json();
        if (!config.cognito) return null;
        const url = new URL('/oauth2/authorize', config.cognito.hosted_ui);
        url.search = new URLSearchParams({
          response_type: 'token',
          client_id: config.cognito.client_id,
          redirect_uri: location.origin + location.pathname,
          scope: 'openid email',
        }).toString();
        return url.href;
      } catch {
        return null;
      }
    },
  };
}

/** A problem+json reply in one line: its title and detail, or the status. */
export async function problem(reply) {
  try {
    const p = await reply.json();
    return [p.title, p.detail].filter(Boolean).join(': ') || `HTTP ${reply.status}`;
  } catch {
    return `HTTP ${reply.status}`;
  }
}

/** Wires a sign-in form: a pasted token, or the hosted UI's link when there is one. */
export async function signInForm(session, { form, input, hostedLink, onSignedIn }) {
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    session.set(input.value);
    input.value = '';
    onSignedIn();
  });
  const hosted = await session.hostedUi();
  if (hosted) {
    hostedLink.href = hosted;
    hostedLink.classList.remove('hidden');
  }
}
