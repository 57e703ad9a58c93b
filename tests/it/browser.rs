//! The console in a real browser: headless Chromium over WebDriver.
