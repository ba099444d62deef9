export function app() {
  return 42;
}
