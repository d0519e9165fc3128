# The Homebrew formula of Blueline, for the tap blueline-app/homebrew-tap
# (Formula/blueline.rb there). packaging/release.sh fills in the @…@ fields
# from the archives it builds; packaging/check.sh checks the result.
class Blueline < Formula
  desc "Self-hosted messaging API for the Messages app of a Mac"
  homepage "https://github.com/blueline-app/blueline"
  version "@VERSION@"

  on_macos do
    on_arm do
      url "@URL_DARWIN_ARM64@"
      sha256 "@SHA256_DARWIN_ARM64@"
    end
    on_intel do
      url "@URL_DARWIN_AMD64@"
      sha256 "@SHA256_DARWIN_AMD64@"
    end
  end

  depends_on :macos

  def install
    bin.install "blueline"
    pkgshare.install "config.example.toml"
  end

  def caveats
    <<~EOS
      Blueline runs as a LaunchAgent of the user signed in to Messages. First
      write its configuration, ~/Library/Application Support/Blueline/blueline.toml
      (README.md, "Install on a Mac host", has the steps, and
      #{opt_pkgshare}/config.example.toml documents every setting):
        mkdir -p ~/Library/Application\\ Support/Blueline ~/Library/Logs/Blueline
      Then start it, now and at each login, one way or the other (both write
      the same agent, app.blueline.daemon):
        brew services start blueline
        blueline install --config ~/Library/Application\\ Support/Blueline/blueline.toml && blueline start
      Give #{opt_bin}/blueline Full Disk Access (System Settings > Privacy &
      Security), and again after each upgrade, then: blueline restart
    EOS
  end

  # The LaunchAgent `blueline install` writes (cli/service.go), under the same
  # label, so that `blueline status|stop|restart` manage either.
  service do
    name macos: "app.blueline.daemon"
    run [opt_bin/"blueline", "serve", "--config", "~/Library/Application Support/Blueline/blueline.toml"]
    working_dir "~/Library/Application Support/Blueline"
    keep_alive true
    log_path "~/Library/Logs/Blueline/blueline.log"
    error_log_path "~/Library/Logs/Blueline/blueline.log"
  end

  test do
    assert_match "blueline #{version} ", shell_output("#{bin}/blueline version")
  end
end
