# frozen_string_literal: true

# Evaluates the Vagrantfile against a recording stand-in for Vagrant's config
# DSL and checks what it declares, for every provider block, under several
# host environments. Needs plain Ruby only (no Vagrant, no provider).
#
#   ruby tests/provision/vagrantfile_test.rb [path/to/Vagrantfile]
#
# Prints one "PASS: ..." or "FAIL: ..." line per check; exits 1 on any failure.

require "json"
require "rbconfig"

VAGRANTFILE = File.expand_path(ARGV[0] || File.join(__dir__, "..", "..", "Vagrantfile"))

# --- child mode: load the Vagrantfile and dump what it configured ------------

# Records any setter / call made on it (provider configs).
class Recorder
  attr_reader :calls

  def initialize
    @calls = {}
  end

  def method_missing(name, *args, **kwargs, &_blk)
    key = name.to_s.delete_suffix("=")
    @calls[key] = kwargs.empty? ? (args.length == 1 ? args[0] : args) : [args, kwargs]
    nil
  end

  def respond_to_missing?(*)
    true
  end
end

# config.vm
class VMRecorder
  attr_accessor :box, :hostname
  attr_reader :networks, :synced_folders, :provisioners

  def initialize
    @networks = []
    @synced_folders = []
    @provisioners = []
  end

  def network(type, **opts)
    @networks << { "type" => type.to_s, "opts" => opts.transform_keys(&:to_s) }
  end

  def synced_folder(src, dest, **opts)
    @synced_folders << { "src" => src, "dest" => dest, "opts" => opts.transform_keys(&:to_s) }
  end

  def provision(name, **opts)
    @provisioners << { "name" => name.to_s, "opts" => opts.transform_keys(&:to_s) }
  end

  def to_h
    { "box" => box, "hostname" => hostname, "networks" => networks,
      "synced_folders" => synced_folders, "provisioners" => provisioners }
  end
end

# config (the object passed to Vagrant.configure's block)
class ConfigRecorder
  attr_reader :vm, :providers

  def initialize
    @vm = VMRecorder.new
    @providers = {}
  end

  # Providers get their own settings object and an override config.
  def vm_provider(name)
    settings = Recorder.new
    override = ConfigRecorder.new
    yield settings, override
    @providers[name.to_s] = { "settings" => settings.calls, "override" => override.vm.to_h }
  end
end

class VMRecorder
  attr_accessor :parent

  def provider(name, &blk)
    parent.vm_provider(name, &blk)
  end
end

class ConfigRecorder
  alias orig_initialize initialize
  def initialize
    orig_initialize
    @vm.parent = self
  end
end

def run_child
  fake = Module.new do
    class << self
      attr_accessor :recorded
    end
    def self.require_version(*); end

    def self.configure(version)
      raise "unexpected config version #{version}" unless version == "2"

      cfg = ConfigRecorder.new
      yield cfg
      self.recorded = cfg
    end
  end
  Object.const_set(:Vagrant, fake)
  Dir.chdir(File.dirname(VAGRANTFILE)) { load VAGRANTFILE }
  cfg = Vagrant.recorded
  puts JSON.generate({ "vm" => cfg.vm.to_h, "providers" => cfg.providers })
end

if ENV["VAGRANTFILE_TEST_CHILD"] == "1"
  run_child
  exit 0
end

# --- parent mode: scenarios and assertions ------------------------------------

$failed = 0
$passed = 0

def check(name, ok, detail = nil)
  if ok
    $passed += 1
    puts "PASS: vagrantfile: #{name}"
  else
    $failed += 1
    puts "FAIL: vagrantfile: #{name}#{detail ? " (#{detail})" : ""}"
  end
end

# evaluate ENV_HASH -> [status, parsed config or stderr]
def evaluate(env)
  clean = ENV.to_h.reject { |k, _| k.start_with?("FLOCK_") }
  child_env = clean.merge(env).merge("VAGRANTFILE_TEST_CHILD" => "1")
  out = IO.popen(child_env, [RbConfig.ruby, __FILE__, VAGRANTFILE], unsetenv_others: true, err: %i[child out], &:read)
  status = $?.exitstatus
  [status, status.zero? ? JSON.parse(out.lines.last) : out]
end

PROVIDERS = %w[virtualbox parallels libvirt].freeze

# 1. defaults
status, cfg = evaluate({})
check("evaluates with no FLOCK_ variables", status.zero?, cfg.is_a?(String) ? cfg.strip : nil)
if status.zero?
  vm = cfg["vm"]
  check("box is Ubuntu 24.04 (bento/ubuntu-24.04)", vm["box"] == "bento/ubuntu-24.04", vm["box"])
  check("declares providers #{PROVIDERS.join(', ')}", PROVIDERS.all? { |p| cfg["providers"].key?(p) }, cfg["providers"].keys.inspect)
  PROVIDERS.each do |p|
    s = cfg.dig("providers", p, "settings") || {}
    check("#{p}: cpus 2 and memory 4096 by default", s["cpus"] == 2 && s["memory"] == 4096, s.inspect)
  end
  lv = cfg.dig("providers", "libvirt", "override") || {}
  check("libvirt: uses a box that has a libvirt build", lv["box"] == "cloud-image/ubuntu-24.04", lv["box"].inspect)
  check("repo synced to /vagrant", vm["synced_folders"].any? { |f| f["src"] == "." && f["dest"] == "/vagrant" })
  all_syncs = vm["synced_folders"] + PROVIDERS.flat_map { |p| cfg.dig("providers", p, "override", "synced_folders") || [] }
  check("nothing synced onto /srv/flock (shared dir stays on the VM's filesystem)",
        all_syncs.none? { |f| f["dest"].to_s.start_with?("/srv") }, all_syncs.inspect)
  fwd = vm["networks"].select { |n| n["type"] == "forwarded_port" }
  ports = fwd.map { |n| [n["opts"]["guest"], n["opts"]["host"]] }.sort
  check("forwards exactly guest 4222 and 8222 to the same host ports", ports == [[4222, 4222], [8222, 8222]], ports.inspect)
  check("every forwarded port binds host_ip 127.0.0.1", !fwd.empty? && fwd.all? { |n| n["opts"]["host_ip"] == "127.0.0.1" })
  check("forwarded ports do not auto-correct to another port", fwd.all? { |n| n["opts"]["auto_correct"] == false })
  check("no other networks (no public/private network)", vm["networks"].all? { |n| n["type"] == "forwarded_port" })
  prov = vm["provisioners"]
  check("one shell provisioner running provision/provision.sh",
        prov.length == 1 && prov[0]["opts"]["type"] == "shell" &&
          prov[0]["opts"]["inline"].to_s.include?("/vagrant/provision/provision.sh"), prov.inspect)
  check("provision env empty without FLOCK_ variables", prov.dig(0, "opts", "env") == {}, prov.dig(0, "opts", "env").inspect)
end

# 2. everything from the environment
env = {
  "FLOCK_VM_CPUS" => "4", "FLOCK_VM_MEMORY" => "8192", "FLOCK_VM_BUS_PORT" => "14222",
  "FLOCK_VM_MONITOR_PORT" => "18222", "FLOCK_VM_BOX" => "example/box", "FLOCK_VM_SYNC_TYPE" => "rsync",
  "FLOCK_GVISOR" => "1", "FLOCK_USERNS_REMAP" => "1", "FLOCK_SKIP_GO" => "1",
}
status, cfg = evaluate(env)
check("evaluates with FLOCK_VM_* and toggles set", status.zero?, cfg.is_a?(String) ? cfg.strip : nil)
if status.zero?
  PROVIDERS.each do |p|
    s = cfg.dig("providers", p, "settings") || {}
    check("#{p}: cpus/memory from FLOCK_VM_CPUS/FLOCK_VM_MEMORY", s["cpus"] == 4 && s["memory"] == 8192, s.inspect)
  end
  check("FLOCK_VM_BOX overrides the box", cfg["vm"]["box"] == "example/box")
  ports = cfg["vm"]["networks"].map { |n| [n["opts"]["guest"], n["opts"]["host"]] }.sort
  check("FLOCK_VM_BUS_PORT/FLOCK_VM_MONITOR_PORT move the host side only", ports == [[4222, 14222], [8222, 18222]], ports.inspect)
  lvs = cfg.dig("providers", "libvirt", "override", "synced_folders") || []
  check("FLOCK_VM_SYNC_TYPE sets the libvirt /vagrant sync type", lvs.any? { |f| f["dest"] == "/vagrant" && f["opts"]["type"] == "rsync" }, lvs.inspect)
  penv = cfg.dig("vm", "provisioners", 0, "opts", "env")
  check("provisioner gets FLOCK_ toggles but no FLOCK_VM_ settings",
        penv == { "FLOCK_GVISOR" => "1", "FLOCK_USERNS_REMAP" => "1", "FLOCK_SKIP_GO" => "1" }, penv.inspect)
end

# 3. libvirt domain type, CPU model and management network
hardware_kvm = File.chardev?("/dev/kvm") &&
               (File.directory?("/sys/module/kvm_intel") || File.directory?("/sys/module/kvm_amd"))
status, cfg = evaluate({})
if status.zero?
  s = cfg.dig("providers", "libvirt", "settings") || {}
  want = hardware_kvm ? "kvm" : "qemu"
  check("libvirt: driver defaults to #{want} on this host (hardware KVM: #{hardware_kvm})", s["driver"] == want, s.inspect)
  check("libvirt: management network left to vagrant-libvirt by default",
        !s.key?("management_network_address") && !s.key?("management_network_name"), s.inspect)
end
status, cfg = evaluate({ "FLOCK_VM_LIBVIRT_DRIVER" => "kvm" })
s = status.zero? ? cfg.dig("providers", "libvirt", "settings") : {}
check("libvirt: FLOCK_VM_LIBVIRT_DRIVER=kvm keeps vagrant-libvirt's host CPU model",
      s["driver"] == "kvm" && !s.key?("cpu_mode") && !s.key?("cpu_model"), s.inspect)
status, cfg = evaluate({ "FLOCK_VM_LIBVIRT_DRIVER" => "qemu" })
s = status.zero? ? cfg.dig("providers", "libvirt", "settings") : {}
check("libvirt: FLOCK_VM_LIBVIRT_DRIVER=qemu (TCG) uses the custom CPU model qemu64",
      s["driver"] == "qemu" && s["cpu_mode"] == "custom" && s["cpu_model"] == "qemu64", s.inspect)
status, cfg = evaluate({ "FLOCK_VM_LIBVIRT_DRIVER" => "kvm", "FLOCK_VM_LIBVIRT_CPU_MODEL" => "Nehalem",
                         "FLOCK_VM_LIBVIRT_NETWORK" => "10.213.121.0/24" })
s = status.zero? ? cfg.dig("providers", "libvirt", "settings") : {}
check("libvirt: FLOCK_VM_LIBVIRT_CPU_MODEL sets a custom CPU model",
      s["cpu_mode"] == "custom" && s["cpu_model"] == "Nehalem", s.inspect)
check("libvirt: FLOCK_VM_LIBVIRT_NETWORK sets a management network of its own",
      s["management_network_address"] == "10.213.121.0/24" && s["management_network_name"] == "flock-vm-10-213-121", s.inspect)
penv = status.zero? ? cfg.dig("vm", "provisioners", 0, "opts", "env") : nil
check("FLOCK_VM_LIBVIRT_* settings are not passed to the provisioner", penv == {}, penv.inspect)

# 4. bad input fails clearly
status, out = evaluate({ "FLOCK_VM_CPUS" => "lots" })
check("rejects a non-integer FLOCK_VM_CPUS with a message naming it",
      !status.zero? && out.to_s.include?("FLOCK_VM_CPUS"), out.to_s.strip)
status, out = evaluate({ "FLOCK_VM_LIBVIRT_DRIVER" => "xen" })
check("rejects an unknown FLOCK_VM_LIBVIRT_DRIVER with a message naming it",
      !status.zero? && out.to_s.include?("FLOCK_VM_LIBVIRT_DRIVER"), out.to_s.strip)
status, out = evaluate({ "FLOCK_VM_LIBVIRT_NETWORK" => "10.213.121.7" })
check("rejects a FLOCK_VM_LIBVIRT_NETWORK that is not a /24 with a message naming it",
      !status.zero? && out.to_s.include?("FLOCK_VM_LIBVIRT_NETWORK"), out.to_s.strip)

puts "vagrantfile: #{$passed} passed, #{$failed} failed"
exit($failed.zero? ? 0 : 1)
