/// <reference types="vitest/config" />
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// `base: './'`: the built files reference each other relatively, so the same dist/ works when
// `switchyard serve --ui ui/dist` serves it at `/` and when the desktop shell embeds it.
// `npm run dev` (or `vite preview`) against a running server: SWITCHYARD_URL=http://127.0.0.1:4141.
// The proxy drops the browser's Origin header, as `serve` refuses cross-origin requests.
const upstream = process.env.SWITCHYARD_URL;
const forward = {
  target: upstream,
  changeOrigin: true,
  configure: (server: { on: (event: 'proxyReq', fn: (req: { removeHeader: (name: string) => void }) => void) => void }) =>
    server.on('proxyReq', (req) => req.removeHeader('origin')),
};
const proxy = upstream ? { '/api': forward, '/v1': forward } : undefined;

export default defineConfig({
  base: './',
  plugins: [react()],
  server: { proxy },
  preview: { proxy },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  test: {
    environment: 'jsdom',
    globals: true,
    setupFiles: ['./src/test/setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    restoreMocks: true,
  },
});
