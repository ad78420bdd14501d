import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { takeSignInCode } from './api/http';
import { insideDesktop } from './api/ipc';
import { applyTheme, storedTheme } from './app/theme';
import './styles.css';

applyTheme(storedTheme());
// Before anything renders: the code leaves the address bar before the page can show or route it.
const signInCode = insideDesktop() ? null : takeSignInCode();
const root = document.getElementById('root');
if (!root) throw new Error('no #root element');
createRoot(root).render(
  <StrictMode>
    <App signInCode={signInCode} />
  </StrictMode>,
);
