// How a page gets the token it calls the API with (docs/DESIGN.md section 12): a token pasted into
// the form (the local runner prints one), or the deployment's Cognito hosted UI when config.json
// names it. The organiser's page keeps it for the tab (sessionStorage); the door's for the device
// (localStorage), so the scanner reopens signed in without the network. Tokens go to the API
// only, in the Authorization header, never into a URL or a log.
//
// The hosted UI's reply is taken only when it carries the `state` this tab sent with the sign-in
// link (a random value kept in sessionStorage): a link someone else made, carrying their token,
// is refused, so nobody can sign a page in as them.
//
// The door asks for a code (`{ refresh: true }`: OAuth's code flow with PKCE, a public client):
// exchanged at the token endpoint, it brings a refresh token too, kept on the device beside the
// ID token, with which the door renews its sign-in before it ends, without staff typing anything
// (a night at the door outlasts the hour an ID token lasts). Revoked in the user pool (a global
// sign-out, or the user disabled), it renews nothing more. The organiser's page keeps the implicit
// flow: a tab's hour.

const STATE_KEY = (page) => `ticket-grab.${page}.sign-in-state`;
const VERIFIER_KEY = (page) => `ticket-grab.${page}.sign-in-verifier`;
const REPLY_FIELDS = ['id_token', 'access_token', 'token_type', 'expires_in', 'state', 'error', 'error_description'];
const CODE_FIELDS = ['code', 'state', 'error', 'error_description'];

let config = null;
/** The deployment's sign-in settings (`config.json`), asked once. */
function signInConfig() {
  config ??= fetch('config.json', { cache: 'no-store', signal: AbortSignal.timeout(5000) })
    .then((r) => r.json())
    .catch(() => {
      config = null; // offline (a reload from the service worker): asked again later
      return {};
    });
  return config;
}

export function session(storage, page, { refresh = false } = {}) {
  const key = `ticket-grab.${page}.token`;
  const refreshKey = `ticket-grab.${page}.refresh`;
  let refused = null;
  let ready = Promise.resolve();
  // Back from the hosted UI with a code (the door): taken when its state is this tab's, then
  // exchanged for the tokens; the reply leaves the address either way.
  const query = new URLSearchParams(location.search);
  if (refresh && (query.has('code') || query.has('error'))) {
    const sent = sessionStorage.getItem(STATE_KEY(page));
    const verifier = sessionStorage.getItem(VERIFIER_KEY(page));
    sessionStorage.removeItem(STATE_KEY(page));
    sessionStorage.removeItem(VERIFIER_KEY(page));
    const code = query.get('code');
    if (query.get('error')) {
      refused = 'The sign-in did not complete: try again.';
    } else if (!sent || !verifier || query.get('state') !== sent) {
      refused = 'That sign-in was refused: it did not come from a sign-in this page started. Sign in again.';
    } else {
      ready = tokens({ grant_type: 'authorization_code', code, redirect_uri: location.origin + location.pathname, code_verifier: verifier })
        .then((ok) => { if (!ok) refused = 'The sign-in could not be completed: try again.'; });
    }
    for (const name of CODE_FIELDS) query.delete(name);
    const rest = query.toString();
    history.replaceState(null, '', location.pathname + (rest ? `?${rest}` : '') + location.hash);
  }
  /** Asks the token endpoint (a code, or the refresh token) and keeps what it gives. */
  async function tokens(grant) {
    const { cognito } = await signInConfig();
    if (!cognito) return false;
    try {
      const reply = await fetch(new URL('/oauth2/token', cognito.hosted_ui), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ ...grant, client_id: cognito.client_id }),
        cache: 'no-store',
        signal: AbortSignal.timeout(10_000),
      });
      if (!reply.ok) {
        // A refresh token revoked or expired: it renews nothing more.
        if (grant.grant_type === 'refresh_token' && (reply.status === 400 || reply.status === 401)) storage.removeItem(refreshKey);
        return false;
      }
      const got = await reply.json();
      if (!got.id_token) return false;
      storage.setItem(key, got.id_token);
      if (got.refresh_token) storage.setItem(refreshKey, got.refresh_token);
      return true;
    } catch {
      return false; // no network: tried again later
    }
  }
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
    /** Settled once a code the hosted UI sent back is exchanged (at once when there is none). */
    ready: () => ready,
    token: () => storage.getItem(key),
    /** A token typed or pasted: a refresh token kept for another sign-in goes. */
    set: (token) => {
      if (storage.getItem(key) !== token.trim()) storage.removeItem(refreshKey);
      storage.setItem(key, token.trim());
    },
    forget: () => {
      storage.removeItem(key);
      storage.removeItem(refreshKey);
    },
    /** Whether the sign-in can be renewed without staff (a refresh token is kept). */
    renewable: () => refresh && storage.getItem(refreshKey) !== null,
    /** Renews the sign-in with the refresh token: true when a new ID token is kept. */
    renew: async () => (refresh && storage.getItem(refreshKey) !== null
      ? tokens({ grant_type: 'refresh_token', refresh_token: storage.getItem(refreshKey) })
      : false),
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
        const { cognito } = await signInConfig();
        if (!cognito) return null;
        const state = randomState();
        sessionStorage.setItem(STATE_KEY(page), state);
        const url = new URL('/oauth2/authorize', cognito.hosted_ui);
        const params = {
          response_type: refresh ? 'code' : 'token',
          client_id: cognito.client_id,
          redirect_uri: location.origin + location.pathname,
          scope: 'openid email',
          state,
        };
        if (refresh) {
          // PKCE: the code is worth nothing without this tab's verifier.
          const verifier = randomState() + randomState();
          sessionStorage.setItem(VERIFIER_KEY(page), verifier);
          const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
          params.code_challenge = btoa(String.fromCharCode(...digest)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
          params.code_challenge_method = 'S256';
        }
        url.search = new URLSearchParams(params).toString();
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
