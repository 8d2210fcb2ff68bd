// The API reference: openapi.yaml (the contract) in Swagger UI, bundled at build time.
window.addEventListener('load', () => {
  window.SwaggerUIBundle({
    url: 'openapi.yaml',
    dom_id: '#api',
    deepLinking: true,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
