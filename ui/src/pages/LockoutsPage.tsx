import { LockoutSettingsForm } from '../components/LockoutSettingsForm';
import { LockoutTable } from '../components/LockoutTable';

export function LockoutsPage() {
  return (
    <div className="page">
      <header className="page-head">
        <h1>Model Lockouts</h1>
      </header>
      <div className="card">
        <LockoutTable />
      </div>
      <div className="card">
        <LockoutSettingsForm />
      </div>
    </div>
  );
}
