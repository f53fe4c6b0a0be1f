import { format, addDays, differenceInDays, parseISO, formatISO, isValid, startOfWeek, eachDayOfInterval, subMonths } from "date-fns";

// Local-time functions: TZ must agree, so the Go test runs node in UTC,
// as the runtime is.
export function run() {
  const d = parseISO("2024-02-27T10:30:00Z");
  const later = addDays(d, 3);
  return {
    parsed: d.getTime(),
    format: format(d, "yyyy-MM-dd HH:mm:ss EEEE do MMMM"),
    addDays: later.toISOString(),
    leap: format(later, "yyyy-MM-dd"),
    differenceInDays: differenceInDays(parseISO("2025-01-01"), parseISO("2024-01-01")),
    formatISO: formatISO(d),
    invalid: isValid(parseISO("not a date")),
    startOfWeek: startOfWeek(d, { weekStartsOn: 1 }).toISOString(),
    interval: eachDayOfInterval({ start: parseISO("2024-12-30"), end: parseISO("2025-01-02") }).map((x) => format(x, "MM/dd")),
    subMonths: subMonths(parseISO("2024-03-31"), 1).toISOString(),
  };
}
