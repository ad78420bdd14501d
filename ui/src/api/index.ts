export { ApiClient, queryString } from './client';
export type { SectionForms, SettingsSection } from './client';
export { ApiFailure, describe } from './failure';
export { HttpTransport, openSession } from './http';
export type { SessionEnd } from './http';
export { IpcTransport, insideDesktop, autostart } from './ipc';
export type { LiveHandlers, Transport } from './transport';
