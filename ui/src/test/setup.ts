import '@testing-library/jest-dom/vitest';
import { cleanup } from '@testing-library/react';
import { afterEach, vi } from 'vitest';
import FakePlot from './fakePlot';

vi.mock('uplot', () => ({ default: FakePlot }));

afterEach(() => {
  cleanup();
  FakePlot.instances = [];
  sessionStorage.clear();
  localStorage.clear();
  window.location.hash = '';
});
