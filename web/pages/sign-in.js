// How a page gets the token it calls the API with (docs/DESIGN.md section 12): a token pasted into
// the form (the local runner prints one), or the deployment's Cognito hosted UI when config.json
// names it. The organiser's page keeps it for the tab (sessionStorage); the door's for the device
// (localStorage), so the scanner reopens signed in without the network. Tokens go to the API
// only, in the Authorization header, never into a URL or a log.
//
// The hosted UI's reply is taken only when it carries the `state` this tab sent with the sign-in
// link (a random value kept in sessionStorage): a link someone else made, carrying their token,
// is refused, so nobody can sign a page in as them.

const STATE_KEY = (page) => `ticket-grab.${page}.sign-in-state`;
const REPLY_FIELDS = ['id_token', 'access_token', 'token_type', 'expires_in', 'state', 'error', 'error_description'];

export function session(storage, page) {
  const key = `ticket-grab.${page}.token`;
  let refused = null;
  // Back from the hosted UI: the ID token arrives in the fragment; keep it when its state is this
  // tab's, then clear the reply away either way (the state is good for one sign-in).
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.has('id_token') || fragment.has('error')) {
    const sent = sessionStorage.getItem(STATE_KEY(page));
    sessionStorage.removeItem(STATE_KEY(page));
    if (fragment.get('error')) {
      // The reply's own words are not shown: anyone can put text in a link to this page.
      refused = 'The sign-in did not complete: try again.';
    } else if (!sent || fragment.get('state') !== sent) {
      refused = 'That sign-in was refused: it did not come from a sign-in this page started. Sign in again.';
    } else {
      storage.setItem(key, fragment.get('id_token'));
    }
    for (const name of REPLY_FIELDS) fragment.delete(name);
    const rest = fragment.toString();
    history.replaceState(null, '', location.pathname + location.search + (rest ? `#${rest}` : ''));
  }
  return {
    /** Why a sign-in that came back from the hosted UI was not taken, or null. */
    refused: () => refused,
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
      // A hung request (weak venue Wi-Fi) fails after 10 s rather than freezing the page.
      return fetch(path, { signal: AbortSignal.timeout(10_000), ...init, headers, cache: 'no-store' });
    },
    /**
     * The hosted UI's sign-in address, when this deployment has one, with a fresh `state` kept
     * for this tab (the reply must bring it back).
     */
    async hostedUi() {
      try {
        const config = await (await fetch('config.json', { cache: 'no-store' })).json();
        if (!config.cognito) return null;
        const state = randomState();
        sessionStorage.setItem(STATE_KEY(page), state);
        const url = new URL('/oauth2/authorize', config.cognito.hosted_ui);
        url.search = new URLSearchParams({
          response_type: 'token',
          client_id: config.cognito.client_id,
          redirect_uri: location.origin + location.pathname,
          scope: 'openid email',
          state,
        }).toString();
        return url.href;
      } catch {
        return null;
      }
    },
  };
}

function randomState() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
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

/**
 * Wires a sign-in form: a pasted token, or the hosted UI's link when there is one. A hosted
 * sign-in that was refused (its state was not this tab's) is said in the form, as an alert.
 */
export async function signInForm(session, { form, input, hostedLink, onSignedIn }) {
  let notice = form.querySelector('.sign-in-notice');
  if (!notice) {
    notice = document.createElement('p');
    notice.className = 'sign-in-notice status error';
    notice.setAttribute('role', 'alert');
    form.prepend(notice);
  }
  notice.textContent = session.refused() || '';
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    session.set(input.value);
    input.value = '';
    notice.textContent = '';
    onSignedIn();
  });
  const hosted = await session.hostedUi();
  if (hosted) {
    hostedLink.href = hosted;
    hostedLink.classList.remove('hidden');
  }
}
