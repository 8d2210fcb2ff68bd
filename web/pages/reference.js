// The API reference: openapi.yaml (the contract) in Swagger UI, bundled at build time. "Try it
// out" calls the API this page was served by: the page's own address without /pages/<file> (the
// spec's one server is the local runner's default address, right only there). The file is left
// as it is; only what the page shows is changed.
const root = location.origin + location.pathname.replace(/\/pages\/[^/]*$/, '');

/** Replaces the spec's servers, whenever a spec is loaded, with this page's API. */
const ThisApi = () => ({
  statePlugins: {
    spec: {
      wrapActions: {
        updateJsonSpec: (update) => (spec) => update({
          ...spec,
          servers: [{ url: root, description: 'this deployment (the page\'s own address)' }],
        }),
      },
    },
  },
});

window.addEventListener('load', () => {
  document.getElementById('server-note').textContent = `"Try it out" calls the API at ${root}.`;
  window.SwaggerUIBundle({
    url: 'openapi.yaml',
    dom_id: '#api',
    deepLinking: true,
    presets: [window.SwaggerUIBundle.presets.apis],
    plugins: [ThisApi],
    layout: 'BaseLayout',
    validatorUrl: null,
  });
});
